#!/usr/bin/env bash
# Differential test: the C logic (natively, under ASan/UBSan) against the Rust guest's own logic
# (guest-foo natively, through tests/oracle) on the same cases: the fixtures' shapes, every serde
# type error, odd names, odd cached Deployments, malformed JSON and random mutations. Every output
# line (result, failure message, events, cache look-ups, logs) must be byte-identical.
#
#   tests/diff.sh [N_RANDOM [SEED]]        default 3000 random cases, seed 1
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KWOP_C_CACHE:-$HOME/.cache/kwop/guests/c}"
WORK="$CACHE/diff"
mkdir -p "$WORK"

cc -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all -I"$HERE/../../../wit/c" \
    -o "$WORK/driver" "$HERE/driver.c" "$HERE/../src/foo.c" "$HERE/../../../wit/c/json.c" -lm
# The oracle is built from a copy in the cache, with the workspace's lock file (the same
# serde_json as the shipped guest) and nothing written into the source tree.
GUEST="$(cd "$HERE/../.." && pwd)"
ORACLE="$CACHE/oracle-crate"
rm -rf "$ORACLE"
mkdir -p "$ORACLE/src"
sed "s|path = \"../../..\"|path = \"$GUEST\"|" "$HERE/oracle/Cargo.toml" >"$ORACLE/Cargo.toml"
cp "$HERE/oracle/src/main.rs" "$ORACLE/src/"
cp "$GUEST/../Cargo.lock" "$ORACLE/Cargo.lock"
CARGO_TARGET_DIR="$CACHE/oracle" cargo build --quiet --release --manifest-path "$ORACLE/Cargo.toml"
python3 "$HERE/gen_cases.py" "${1:-3000}" "${2:-1}" >"$WORK/cases.txt"
"$WORK/driver" <"$WORK/cases.txt" >"$WORK/c.txt"
"$CACHE/oracle/release/guest-foo-c-oracle" <"$WORK/cases.txt" >"$WORK/rust.txt"

total=$(wc -l <"$WORK/cases.txt")
paste -d'\t' "$WORK/rust.txt" "$WORK/c.txt" | awk -F'\t' '$1 != $2 { print NR }' >"$WORK/failed.txt"
failed=$(wc -l <"$WORK/failed.txt")
if [ "$failed" -gt 0 ]; then
    head -3 "$WORK/failed.txt" | while read -r n; do
        echo "case $n: $(sed -n "${n}p" "$WORK/cases.txt")"
        echo "  rust: $(sed -n "${n}p" "$WORK/rust.txt")"
        echo "  c:    $(sed -n "${n}p" "$WORK/c.txt")"
    done
fi
echo "$((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
