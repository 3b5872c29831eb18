#!/usr/bin/env bash
# zbpp's schedule CSVs as PyTorch itself reads them: with torch installed (the GPU machine has
# it; scripts/gpu_session.sh test runs this), every cell of every family's compute-only and
# lowered CSV goes through torch.distributed.pipelining's own _Action.from_str and must come back
# as the same (stage, type, microbatch); PyTorch's own lowering (_add_send_recv) must accept the
# compute-only schedule. Without torch: skipped (77). The grammar alone is checked everywhere by
# python/tests/test_zbpp.py.
# usage: pytorch_load_csv.sh <zbpp binary> <source dir>
set -u
Z=$(readlink -f "$1")
python3 -c "import torch.distributed.pipelining.schedules" 2>/dev/null || {
    echo "SKIPPED: torch not installed (run on the GPU machine: scripts/gpu_session.sh test)"
    exit 77
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for fam in gpipe 1f1b zb-h1 zb-h2 interleaved-1f1b interleaved-zb zb-v v-half dualpipev looped-bfs; do
    for fmt in csv csv-comms; do
        "$Z" schedule -s $fam -p 4 -m 8 --format $fmt -o "$T/$fam.$fmt" 2>/dev/null ||
            { echo "FAIL: zbpp schedule -s $fam --format $fmt"; exit 1; }
    done
done
python3 - "$T" <<'PY'
import csv, os, sys
from torch.distributed.pipelining import schedules as S
# our letters -> torch's _ComputationType member names (compared by name: the members' values
# are ints in some torch versions and the letters in others)
names = {"F": "FORWARD", "I": "BACKWARD_INPUT", "W": "BACKWARD_WEIGHT", "B": "FULL_BACKWARD",
         "SEND_F": "SEND_F", "RECV_F": "RECV_F", "SEND_B": "SEND_B", "RECV_B": "RECV_B"}
bad = 0
for name in sorted(os.listdir(sys.argv[1])):
    rows = list(csv.reader(open(os.path.join(sys.argv[1], name), newline="")))
    order = {}
    for rank, row in enumerate(rows):
        order[rank] = []
        for cell in row:
            a = S._Action.from_str(cell)
            # our own reading of the cell: <stage><type><mb>
            i = 0
            while cell[i].isdigit():
                i += 1
            j = len(cell)
            while cell[j - 1].isdigit():
                j -= 1
            want = (int(cell[:i]), names.get(cell[i:j], "unknown " + cell[i:j]), int(cell[j:]))
            got = (a.stage_index, a.computation_type.name, a.microbatch_index)
            if got != want:
                print(f"FAIL: {name}: torch reads {cell!r} as {got}, zbpp wrote {want}")
                bad += 1
            order[rank].append(a)
    if name.endswith(".csv") and hasattr(S, "_add_send_recv"):
        stages = 1 + max(a.stage_index for r in order.values() for a in r)
        owner = {a.stage_index: r for r, acts in order.items() for a in acts}
        try:
            S._add_send_recv(order, stage_to_rank=lambda s: owner[s], num_stages=stages)
        except Exception as e:  # PyTorch's lowering refused the schedule
            print(f"FAIL: {name}: torch's _add_send_recv: {e}")
            bad += 1
print(f"pytorch_load_csv: {len(os.listdir(sys.argv[1]))} files, {bad} problems (torch "
      f"{__import__('torch').__version__})")
sys.exit(1 if bad else 0)
PY
