#!/usr/bin/env bash
# zbpp train --schedule-file: a PyTorch pipelining CSV (compute-only or lowered) trains
# bit-identically to --ranks 1, on threads and under MPI; its shape must agree with the flags;
# a malformed or deadlocking file is refused with one line. Also: the planning hang of issue 9
# (auto under a tiny --mem-limit-mb) ends in bounded time, and the whole-rank memory report.
# usage: cli_schedule_file.sh <zbpp binary> <source dir>
set -euo pipefail
Z=$(readlink -f "$1")
SRC=$(readlink -f "$2")
tmp=$(mktemp -d)
export OMPI_MCA_orte_tmpdir_base="$tmp" # own Open MPI session dir: concurrent mpiruns race on /tmp's
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--text "$SRC/data/demo_corpus.txt" --layers 4 --channels 32 --heads 2 --seq 16
        --batch 4 --steps 3 --quiet --partition flops)

"$Z" train "${common[@]}" --microbatches 4 --save "$tmp/ref.ckpt"
"$Z" schedule -s zb-v -p 2 -m 4 --format csv -o "$tmp/zbv.csv"
"$Z" schedule -s interleaved-zb -p 2 -m 4 --format csv -o "$tmp/izb.csv"
"$Z" schedule -s zb-h2 -p 2 -m 4 --format csv-comms -o "$tmp/lowered.csv"
"$Z" schedule -s 1f1b -p 4 -m 4 --format csv -o "$tmp/p4.csv"
for f in zbv izb lowered p4; do
    # --ranks and --microbatches come from the file
    "$Z" train "${common[@]}" --schedule-file "$tmp/$f.csv" --save "$tmp/$f.ckpt"
    cmp "$tmp/ref.ckpt" "$tmp/$f.ckpt" || fail "$f.csv: checkpoint differs from --ranks 1"
done
# flags that agree are accepted
"$Z" train "${common[@]}" --schedule-file "$tmp/zbv.csv" --ranks 2 --microbatches 4 --chunks 2 \
    --save "$tmp/agree.ckpt"
cmp "$tmp/ref.ckpt" "$tmp/agree.ckpt" || fail "agreeing flags: checkpoint differs"

# refusals: exit status and one line naming the problem
expect() { # expect STATUS PATTERN -- args...
    local want=$1 pat=$2
    shift 3
    set +e
    err=$("$Z" train "${common[@]}" "$@" 2>&1 >/dev/null)
    rc=$?
    set -e
    [ "$rc" = "$want" ] || fail "'$*': exit $rc, wanted $want ($err)"
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "'$*': not one line: $err"
    grep -q -- "$pat" <<<"$err" || fail "'$*': message '$err' lacks '$pat'"
}
expect 2 "has 2 ranks (rows) but --ranks is 4" -- --schedule-file "$tmp/zbv.csv" --ranks 4
expect 2 "has 4 microbatches but --microbatches is 2" -- --schedule-file "$tmp/zbv.csv" \
    --microbatches 2
expect 2 "either --schedule or --schedule-file" -- --schedule-file "$tmp/zbv.csv" --schedule 1f1b
expect 2 "stages per rank but --chunks is 1" -- --schedule-file "$tmp/zbv.csv" --chunks 1
echo "junk" >"$tmp/junk.csv"
expect 1 "junk.csv: line 1" -- --schedule-file "$tmp/junk.csv"
expect 1 "cannot open" -- --schedule-file "$tmp/missing.csv"
# a file whose rank 0 waits for a gradient before sending the forward it depends on
printf '0F0,0I0,0W0\n1F0,1I0,1W0\n' >"$tmp/ok.csv"
printf '0I0,0F0,0W0\n1F0,1I0,1W0\n' >"$tmp/deadlock.csv"
"$Z" train "${common[@]}" --schedule-file "$tmp/ok.csv" --batch 1 --steps 1
set +e
err=$("$Z" train "${common[@]}" --schedule-file "$tmp/deadlock.csv" --batch 1 --steps 1 2>&1)
rc=$?
set -e
[ "$rc" != 0 ] || fail "an invalid schedule file was trained"
grep -q "deadlock: rank 0 waits" <<<"$err" || fail "invalid file: unclear message: $err"

# whole-rank memory: predicted and measured per rank, and a limit in MiB
loud=()
for a in "${common[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
out=$("$Z" train "${loud[@]}" --ranks 2 --microbatches 4 --schedule zb-h1 2>/dev/null)
grep -q "memory per rank, MiB" <<<"$out" || fail "no memory report"
[ "$(grep -c '^  predicted' <<<"$out")" = 2 ] || fail "not one predicted row per rank"
[ "$(grep -c '^  measured' <<<"$out")" = 2 ] || fail "not one measured row per rank"
grep -q "peak RSS" <<<"$out" || fail "no RSS in the memory report"
expect 1 "memory limit 0.10 MiB per rank is below" -- --ranks 2 --microbatches 4 \
    --mem-limit-mb 0.1

# issue 9's planning hang: auto under a tiny whole-rank limit ends (schedule or clear error)
for lim in 1.5 2 3; do
    set +e
    timeout 60 "$Z" train --text "$SRC/data/demo_corpus.txt" --layers 4 --channels 64 --ranks 2 \
        --microbatches 4 --schedule auto --chunks 2 --mem-limit-mb "$lim" --partition flops \
        --steps 1 --quiet >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    [ "$rc" != 124 ] || fail "auto --mem-limit-mb $lim did not end within 60 s"
    [ "$rc" = 0 ] || [ "$(wc -l <"$tmp/err")" = 1 ] || fail "auto $lim: $(cat "$tmp/err")"
done

# MPI: the same file, one process per rank, the same bits
if command -v mpirun >/dev/null 2>&1 &&
   ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 1 \
       "$Z" train --transport mpi --steps 0 --quiet --text "$SRC/data/demo_corpus.txt" 2>&1 |
       grep -q "built without MPI"; then
    (cd "$tmp" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 -np 2 "$Z" train "${common[@]}" \
        --transport mpi --schedule-file "$tmp/zbv.csv" --save "$tmp/mpi.ckpt" >/dev/null)
    cmp "$tmp/ref.ckpt" "$tmp/mpi.ckpt" || fail "MPI with --schedule-file differs from --ranks 1"
fi
echo "cli_schedule_file: ok"
