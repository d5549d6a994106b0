"""Every input limit refuses within 2 s of CPU and 200 MB: ``python benchmarks/limits.py``.

Each case runs in a fresh process: the modules it needs are imported first, then the CPU
time, the wall time and the growth of the peak resident set (``ru_maxrss``) of the one call
that must refuse the input are measured. Prints, per limit, the CPU and wall seconds and MB
it took, and the one-line error; exits non-zero if a case is accepted, crashes, or takes over
2 s of CPU or 200 MB. The target is judged on CPU seconds, which other processes sharing the
cores do not inflate; wall seconds are printed beside them (a loaded 2-core machine reads them
2x or more slower).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LIMIT_S, LIMIT_MB = 2.0, 200.0

PROBE = r"""
import json, resource, sys, time
from rankmap.errors import RankmapError
from rankmap.fileio import read_text, parse_json
from rankmap.yamlio import parse_yaml
from rankmap.topology.spec import parse_cluster, load_cluster
from rankmap.topology.importers import import_text
from rankmap.topology.sources import ImportOptions
from rankmap.placement.constraints import load_constraints
from rankmap.job.rank_map import parse_rankmap
from rankmap.examples import example_path
cluster = load_cluster(example_path("racks", "cluster.yaml"))
call = eval("lambda: " + sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
try:
    call()
    outcome = "ACCEPTED"
except RankmapError as exc:
    outcome = str(exc)
cpu, took = time.process_time() - c0, time.perf_counter() - t0
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"cpu_s": cpu, "s": took, "mb": grew, "error": outcome}))
"""


def cases(tmp: Path) -> dict[str, str]:
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    big = tmp / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(200 * 2**20)
    (tmp / "k.yaml").write_text('reserve: ["/dev/zero"]\n')
    hosts3m = "tor_groups:\n" + "".join(f"  - {{name: g{i}, hosts: 'n{i}x[0000000-0099999]'}}\n" for i in range(30))
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                                                     for p, c in zip("abcdefgh", "bcdefghi"))
    volcano = ("apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: s0}\nspec:\n  tier: 1\n"
               "  members:\n  - type: Node\n    selector:\n      regexMatch: {pattern: '(a+)+$'}\n")
    w = lambda name, text: (tmp / name).write_text(text) and str(tmp / name)
    with open(tmp / "hosts3m.txt", "w") as handle:  # a 59 MB hostfile of 3M hosts, under the 64 MiB cap
        handle.writelines(f"node{i} slots=8\n" for i in range(3_000_000))
    return {
        "/dev/zero": "read_text('/dev/zero')",
        "/dev/urandom": "read_text('/dev/urandom')",
        "FIFO without writer": f"read_text({str(fifo)!r})",
        "200 MB file": f"read_text({str(big)!r})",
        "reserve: /dev/zero": f"load_constraints({str(tmp / 'k.yaml')!r}, cluster)",
        f"{len(hosts3m)} B spec of 3M hosts": f"load_cluster({w('h.yaml', hosts3m)!r})",
        "100 KB host name": "parse_cluster('tor_groups: [{name: t, hosts: [' + 'a' * 100_000 + ']}]', 'c.yaml')",
        "100 KB hostlist": "parse_cluster('tor_groups: [{name: t, hosts: \"n[' + ','.join(map(str, range(20000))) "
                           "+ ']\"}]', 'c.yaml')",
        "YAML alias bomb": f"load_cluster({w('bomb.yaml', bomb)!r})",
        "100,000-deep YAML": "parse_yaml('a: ' + '[' * 100_000 + ']' * 100_000, 'c.yaml')",
        "100,000-deep JSON rank map": "parse_rankmap('[' * 100_000 + ']' * 100_000, 'r.json')",
        "100,000-deep kubectl JSON": "import_text('k8s-labels', '{\"items\": ' + '[' * 100_000 + ']' * 100_000 + '}',"
                                     " 'n.json')",
        "5,000-digit YAML integer": "parse_cluster('tor_groups: [{name: t, capacity: ' + '9' * 5000 + ', hosts: n1}]',"
                                    " 'c.yaml')",
        "59 MB hostfile of 3M hosts": f"import_text('hostfile', read_text({str(tmp / 'hosts3m.txt')!r}), 'hosts')",
        "5,000-digit hostfile slots": "import_text('hostfile', 'n1 slots=' + '9' * 5000, 'hosts')",
        "Volcano (a+)+$ over 253-char names": f"import_text('volcano', {volcano!r}, 'hn.yaml', "
                                              "ImportOptions(hosts=tuple('a' * 252 + str(i % 10) for i in range(10))))",
    }


def main() -> int:
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'limit':38s} {'CPU s':>6s} {'wall s':>6s} {'MB':>6s}  error")
        for name, call in cases(Path(tmp)).items():
            run = subprocess.run([sys.executable, "-c", PROBE, call], capture_output=True, text=True, timeout=120)
            try:
                res = json.loads(run.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                print(f"{name:38s} crashed: {run.stderr.strip()[-300:]}")
                bad += 1
                continue
            ok = res["error"] != "ACCEPTED" and res["cpu_s"] <= LIMIT_S and res["mb"] <= LIMIT_MB
            bad += not ok
            print(f"{name:38s} {res['cpu_s']:6.3f} {res['s']:6.3f} {res['mb']:6.1f}  {'' if ok else 'FAIL '}"
                  f"{res['error'][:100]}")
    print("every limit held" if not bad else f"{bad} limits failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
