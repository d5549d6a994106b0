"""Node label keys that clouds and Kubernetes put on nodes, read by :mod:`rankmap.topology.k8s`
and written by :mod:`rankmap.topology.k8s_export`.

AWS EC2 instance topology, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html ;
GKE compact placement / topology labels, https://cloud.google.com/kubernetes-engine/docs ;
NVIDIA GPU feature discovery (``nvidia.com/gpu.count``), https://github.com/NVIDIA/gpu-feature-discovery
"""

from __future__ import annotations

__all__ = ["AWS_LAYER", "GKE_LEVELS", "HOST_LEVELS", "GPU_RESOURCES", "GPU_LABEL"]

AWS_LAYER = "topology.k8s.aws/network-node-layer-"
GKE_LEVELS = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
              "cloud.google.com/gce-topology-host")
HOST_LEVELS = ("kubernetes.io/hostname", "cloud.google.com/gce-topology-host")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
GPU_LABEL = "nvidia.com/gpu.count"
