#!/usr/bin/env bash
# The C SDK's native tests: wit/c/test.sh (cc, under ASan/UBSan when the compiler has them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${KWOP_C_CACHE:-$HOME/.cache/kwop/guests/c}/sdk-test"
mkdir -p "$(dirname "$out")"
flags=(-std=c11 -Wall -Wextra -Werror -g)
if echo 'int main(void){return 0;}' | cc -x c - -fsanitize=address,undefined -o "$out.probe" 2>/dev/null; then
  flags+=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
fi
cc "${flags[@]}" -o "$out" tests/test_kwop.c kwop.c json.c
exec "$out"
