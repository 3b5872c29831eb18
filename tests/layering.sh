#!/usr/bin/env bash
# The folder rule of docs/architecture.md, checked on the sources:
#  1. every #include "X/..." in src/ and include/zbpp/ names a folder at the including file's
#     layer or below it (a public header include/zbpp/NAME.h counts as its owner's folder, from
#     the table below); two folders of the same layer may not include each other;
#  2. no include circle between files, where a header and the .c/.cu files of its own name
#     beside it count as one (src/F/x.h with src/F/x.c: the module F/x): x.c including y.h while
#     y.c includes x.h is a circle, even though no header includes itself.
# Usage: layering.sh [<zbpp-binary>] <source-dir>   (the binary is not used)
set -u
SRC=${2:-${1:-.}}
cd "$SRC" || exit 1
[ -d src ] && [ -d include/zbpp ] || { echo "layering.sh: $SRC is not the source tree"; exit 1; }

# Layers, lowest first: a folder may include its own files and those of lower layers only.
LAYERS='
util 0
schedule 1
nn 1
model 2
chart 2
comm 2
cuda 3
profile 4
train 5
pipeline 6
api 7
cli 8
'

# The folder that owns (implements) each public header.
OWNERS='
error util
util util
workers util
hash util
schedule schedule
schedule_io schedule
plan schedule
svg schedule
nn nn
gpt2 model
gpt2_infer model
data model
tokenizer model
optim model
transport comm
transport_mpi comm
handshake comm
cuda cuda
profile profile
train train
checkpoint_sharded train
executor pipeline
pipeline pipeline
pipeline_generate pipeline
pipeline_trace pipeline
planner_api api
version api
'

files=$(find src include/zbpp -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
for f in $files; do
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
    while read -r inc; do printf '%s %s\n' "$f" "$inc"; done
done | awk -v layers="$LAYERS" -v owners="$OWNERS" -v allfiles="$files" '
function folder_of(path,   p) {       # src/F/x.c -> F; include/zbpp/x.h -> its owner
  if (path ~ /^src\//) { split(path, p, "/"); return p[2] }
  if (path ~ /^include\/zbpp\//) { p[1] = path; sub(/^include\/zbpp\//, "", p[1]); sub(/\.h$/, "", p[1]);
    return (p[1] in owner) ? owner[p[1]] : "?" }
  return "?"
}
function resolve(from, inc) {           # "zbpp/x.h" -> include/zbpp/x.h; "F/x.h" -> src/F/x.h
  if (inc ~ /^zbpp\//) return "include/" inc
  return "src/" inc
}
function node(path,   m) {             # src/F/x.{c,h,cu} -> module src/F/x; public headers stay
  m = path; if (m ~ /^src\//) sub(/\.(c|h|cu)$/, "", m); return m
}
function visit(u,   i, v, k, cyc) {     # depth-first search; grey nodes are on the path
  state[u] = 1; path[++depth] = u
  for (i = 1; i <= nadj[u]; i++) {
    v = adj[u, i]
    if (state[v] == 1) {
      cyc = v
      for (k = depth; k >= 1 && path[k] != v; k--) cyc = path[k] " -> " cyc
      print "include circle: " v " -> " cyc; bad++
    } else if (state[v] == 0) visit(v)
  }
  depth--; state[u] = 2
}
BEGIN {
  n = split(layers, L, "\n"); for (i = 1; i <= n; i++) if (split(L[i], w, " ") == 2) rank[w[1]] = w[2]
  n = split(owners, O, "\n"); for (i = 1; i <= n; i++) if (split(O[i], w, " ") == 2) owner[w[1]] = w[2]
  n = split(allfiles, F, "\n")
  for (i = 1; i <= n; i++) { exists[F[i]] = 1; state[node(F[i])] = 0 }
}
{
  from = $1; inc = $2
  if (inc !~ /\//) next                 # a header beside the file (tests only) or a generated one
  to = resolve(from, inc)
  if (!(to in exists)) {
    if (inc == "zbpp/version.h") next   # generated into the build tree
    print from ": includes \"" inc "\", which is not in src/ or include/"; bad++; next
  }
  u = node(from); v = node(to)
  if (u != v && !((u, v) in seen)) { seen[u, v] = 1; adj[u, ++nadj[u]] = v }
  a = folder_of(from); b = folder_of(to)
  if (!(a in rank)) { print from ": folder " a " has no layer (add it to tests/layering.sh)"; bad++; next }
  if (!(b in rank)) { print from ": \"" inc "\" belongs to no layer (add it to tests/layering.sh)"; bad++; next }
  if (a != b && rank[b] >= rank[a])
    { print from " (" a ", layer " rank[a] ") includes \"" inc "\" (" b ", layer " rank[b] ")"; bad++ }
  edges++
}
END {
  for (i = 1; i <= n; i++) if (state[node(F[i])] == 0) visit(node(F[i]))
  if (edges < 100) { print "only " edges " includes read: is " ENVIRON["PWD"] " the source tree?"; bad++ }
  if (bad) { print bad " layering problem(s)"; exit 1 }
  print edges " includes between " n " files: layers kept, no circle"
}'
