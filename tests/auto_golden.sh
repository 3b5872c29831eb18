#!/usr/bin/env bash
# auto's output is a contract: the same flags give the same schedule, byte for byte, whatever
# is done to make the search faster. Each case's CSV (or plan's JSON) is compared with the MD5
# recorded in tests/fixtures/auto_golden.txt.
# Usage: bash auto_golden.sh <zbpp binary> <source dir>
#        bash auto_golden.sh <zbpp binary> <source dir> --write   (record a deliberate change)
set -u
ZBPP=$1
GOLDEN=$2/tests/fixtures/auto_golden.txt

cases() { # one case per line: the zbpp command's arguments
    for P in 2 3 4 8 16; do
        for k in 1 4; do
            M=$((k * P))
            for cost in "" "--cost 1,2,1,0" "--cost 18522,18086,9337,601 --mem 34,-2,-32" \
                "--cost 10408,10204,7703,408"; do
                for lim in "" "--mem-limit $((P + 1))" "--mem-limit $((2 * P))"; do
                    echo "schedule -s auto -p $P -m $M $cost $lim --format csv"
                done
            done
        done
    done
    echo "schedule -s auto -p 8 -m 16 --any-placement --format csv"
    echo "schedule -s auto -p 8 -m 32 --any-placement --mem-limit 9 --format csv"
    echo "schedule -s auto -p 6 -m 12 --mem-limit-ranks 7,7,7,6,6,6 --format csv"
    echo "schedule -s auto -p 4 -m 8 --recompute auto --mem-limit 3 --format csv"
    echo "schedule -s auto -p 4 -m 8 --recompute all --format csv"
    echo "schedule -s auto -p 32 -m 128 --any-placement --mem-limit 40 --format csv"
    echo "schedule -s auto -p 48 -m 192 --cost 18522,18086,9337,601 --format csv"
    echo "plan -p 8 -m 24 --cost 1,2,1,0 --format json"
    echo "plan -p 6 -m 12 --mem-limit 8 --recompute auto --format json"
}

digest() { # the case's output (stdout and stderr) and exit code, hashed
    # shellcheck disable=SC2086 # a case is a list of arguments
    { "$ZBPP" $1 2>&1; echo "rc=$?"; } | md5sum | cut -d' ' -f1
}

if [ "${3:-}" = --write ]; then
    cases | while read -r c; do printf '%s  %s\n' "$(digest "$c")" "$c"; done >"$GOLDEN"
    echo "wrote $(wc -l <"$GOLDEN") cases to $GOLDEN"
    exit 0
fi
[ -r "$GOLDEN" ] || { echo "FAIL: no $GOLDEN"; exit 1; }
n=0 bad=0
while read -r c; do
    n=$((n + 1))
    want=$(awk -v c="$c" 'substr($0, 35) == c {print $1; exit}' "$GOLDEN")
    if [ -z "$want" ]; then
        echo "FAIL: no recorded digest for: $c"; bad=$((bad + 1)); continue
    fi
    got=$(digest "$c")
    if [ "$got" != "$want" ]; then
        echo "FAIL: output changed: zbpp $c"; bad=$((bad + 1))
    fi
done < <(cases)
echo "$n cases, $bad changed"
[ "$bad" -eq 0 ]
