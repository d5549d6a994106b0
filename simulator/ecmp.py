"""ECMP path choice: a deterministic hash of each flow's 5-tuple, salted per switch.

A switch with ``n`` equal-cost next hops sends a packet's flow to hop
``hash(5-tuple) mod n``; every packet of a flow takes the same path, so two heavy flows
hashed onto one uplink share it for their whole life (the collisions MegaScale, NSDI
2024, §3.3, and Meta, SIGCOMM 2024, §5, report). For RoCEv2 the 5-tuple is (source
address, destination address, UDP source port, UDP destination port 4791, protocol 17);
the NIC derives the source port from the queue pair, so several queue pairs per
connection (``NCCL_IB_QPS_PER_CONNECTION``) give a connection several paths.

The hash is MurmurHash3's 64-bit finaliser (``fmix64``, Appleby, public domain) chained
over the fields; a switch mixes its own salt in first. With ``per_switch_salt=False``
every switch uses the same salt -- the setting that shows hash polarization: a flow that
took next hop ``p`` at one tier takes index ``p`` again at the next, and half the upper
switches stay idle (hash polarization; per-switch seeds are the remedy, cf. Alibaba HPN,
SIGCOMM 2024, on dual-plane designs against polarization). A linear hash (a CRC whose initial value is XORed with
the salt) would stay polarized under salting; the non-linear mixer does not.

Every random choice is a function of ``seed``: the seed sets the queue-pair source ports
(which the NIC driver assigns in practice) and the switches' salts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EcmpConfig", "ROUTING_MODES", "ROCE_V2_PORT", "UDP_PROTOCOL", "mix64", "flow_hash",
           "choose", "switch_salt", "roce_source_port"]

ROUTING_MODES = ("ecmp", "spray")
ROCE_V2_PORT = 4791   # IANA UDP port of RoCEv2 (InfiniBand Architecture Spec, Annex A17)
UDP_PROTOCOL = 17

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_GOLDEN = 0x9E3779B97F4A7C15  # 2^64 / golden ratio, spreads consecutive integers


@dataclass(frozen=True, kw_only=True)
class EcmpConfig:
    """How flows are spread over equal-cost paths.

    Attributes
    ----------
    mode : str
        ``"ecmp"`` (hash each flow onto one path) or ``"spray"`` (ideal packet spraying:
        every flow splits evenly over all paths, the bound adaptive routing approaches).
    seed : int
        Sets queue-pair source ports and switch salts; same seed, same paths.
    per_switch_salt : bool
        Salt the hash per switch (True, as deployed) or use one salt everywhere (False:
        shows polarization).
    qps_per_connection : int
        Queue pairs per connection; each carries an equal share and hashes on its own.

    Raises
    ------
    ValueError
        Unknown mode, negative seed, or fewer than one queue pair.
    """

    mode: str = "ecmp"
    seed: int = 0
    per_switch_salt: bool = True
    qps_per_connection: int = 1

    def __post_init__(self) -> None:
        if self.mode not in ROUTING_MODES:
            raise ValueError(f"routing mode must be one of {', '.join(ROUTING_MODES)}, got {self.mode!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.qps_per_connection, int) or self.qps_per_connection < 1:
            raise ValueError(f"qps_per_connection must be an integer >= 1, got {self.qps_per_connection!r}")


def mix64(x) -> np.ndarray:
    """MurmurHash3 ``fmix64`` of every element (uint64 in, uint64 out; wraps mod 2^64).

    Examples
    --------
    >>> int(mix64(np.array([0], dtype=np.uint64))[0]), hex(int(mix64(np.array([1], dtype=np.uint64))[0]))
    (0, '0xb456bcfc34c2cb2c')
    """
    x = np.array(x, dtype=np.uint64, ndmin=1)  # a copy: the caller's array is left alone
    x ^= x >> _S33
    x *= _C1
    x ^= x >> _S33
    x *= _C2
    x ^= x >> _S33
    return x


def _u64(value) -> np.ndarray:
    """Integers (possibly negative or Python ints) as uint64 arrays, two's complement."""
    arr = np.asarray(value)
    if arr.dtype == np.uint64:
        return arr
    return arr.astype(np.int64).astype(np.uint64)


def switch_salt(seed: int, switch_id, per_switch: bool = True) -> np.ndarray:
    """Hash salt of each switch in ``switch_id[N]`` (uint64[N]).

    ``per_switch=False`` gives every switch the same salt (a function of ``seed`` only).
    """
    base = mix64(np.uint64((seed * _GOLDEN + 0x5A17) % 2**64))
    ids = _u64(switch_id)
    if not per_switch:
        return np.broadcast_to(base, np.shape(ids)).copy() if np.ndim(ids) else base
    return mix64(base ^ mix64(ids + np.uint64(1)))


def roce_source_port(conn_key, qp, seed: int) -> np.ndarray:
    """UDP source port of queue pair ``qp`` of connection ``conn_key``: 49152 + 14 bits of hash.

    Stands for the queue-pair number the driver hands out; changes with ``seed``.
    """
    salt = np.uint64((seed * _GOLDEN + 0xC0FFEE) % 2**64)
    h = mix64(_u64(conn_key) ^ mix64(_u64(qp) ^ salt))
    return (np.uint64(0xC000) | (h & np.uint64(0x3FFF))).astype(np.int64)


def flow_hash(src_addr, dst_addr, src_port, salt, dst_port: int = ROCE_V2_PORT,
              protocol: int = UDP_PROTOCOL) -> np.ndarray:
    """ECMP hash of 5-tuples, broadcast over the inputs (uint64).

    Parameters
    ----------
    src_addr, dst_addr : array_like of int
        Addresses of the two NICs.
    src_port : array_like of int
        UDP source ports (one per queue pair).
    salt : array_like of uint64
        Salt of the switch making the choice (:func:`switch_salt`).
    dst_port, protocol : int
        4791 and 17 for RoCEv2.
    """
    h = mix64(_u64(salt) ^ _u64(src_addr))
    h = mix64(h ^ _u64(dst_addr))
    ports = (_u64(src_port) << np.uint64(24)) | np.uint64((dst_port << 8) | protocol)
    return mix64(h ^ ports)


def choose(hashes: np.ndarray, n_choices) -> np.ndarray:
    """Next-hop index ``(hash >> 32) mod n`` (int64), as a switch picks among ``n`` paths.

    Examples
    --------
    >>> choose(np.array([5 << 32, 7 << 32], dtype=np.uint64), 4).tolist()
    [1, 3]
    """
    n = _u64(n_choices)
    return ((np.asarray(hashes, dtype=np.uint64) >> np.uint64(32)) % n).astype(np.int64)
