#!/usr/bin/env bash
# CPU (user) seconds of the planner commands on large shapes, median of N runs, for one zbpp
# binary or two side by side (e.g. a build of an older commit as the reference): the user time
# is what one core spends, so a loaded machine changes it less than the wall time.
# Usage: bench/bench_plan_time.sh NEW_ZBPP [REFERENCE_ZBPP] [RUNS]
# Shapes: ZB_BENCH_SHAPES="128x1024 256x2048" (default); families: ZB_BENCH_CMDS (default below).
set -u
NEW=$1
REF=${2:-}
RUNS=${3:-3}
SHAPES=${ZB_BENCH_SHAPES:-"128x1024 256x2048"}
CMDS=${ZB_BENCH_CMDS:-"auto v-half v-min zb-v interleaved-zb plan"}

# user seconds of one run of "$@", stdout and stderr dropped
user_s() {
  local f
  f=$(mktemp)
  /usr/bin/time -o "$f" -f "%U" "$@" >/dev/null 2>&1
  tail -1 "$f"
  rm -f "$f"
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

printf '%-16s %-10s %10s' command shape "new_user_s"
[ -n "$REF" ] && printf ' %10s %7s' "ref_user_s" "ref/new"
printf '\n'
for shape in $SHAPES; do
  P=${shape%x*} M=${shape#*x}
  for cmd in $CMDS; do
    if [ "$cmd" = plan ]; then
      args=(plan -p "$P" -m "$M")
    else
      args=(schedule -s "$cmd" -p "$P" -m "$M" --format json -o /dev/null)
    fi
    new=() ref=()
    for _ in $(seq "$RUNS"); do
      new+=("$(user_s "$NEW" "${args[@]}")")
      [ -n "$REF" ] && ref+=("$(user_s "$REF" "${args[@]}")")
    done
    n=$(median "${new[@]}")
    printf '%-16s %-10s %10s' "$cmd" "$shape" "$n"
    if [ -n "$REF" ]; then
      r=$(median "${ref[@]}")
      printf ' %10s %7.2f' "$r" "$(awk -v a="$r" -v b="$n" 'BEGIN {print (b > 0 ? a / b : 0)}')"
    fi
    printf '\n'
  done
done
