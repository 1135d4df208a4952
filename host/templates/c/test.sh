#!/usr/bin/env bash
# The native unit tests: ./test.sh   (the logic, the SDK and the JSON library built for this machine
# with cc, under AddressSanitizer when the compiler has it; no WASM toolchain needed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
cc="${CC:-cc}"
mkdir -p build
flags=(-std=c11 -Wall -Wextra -Werror -g -Isrc)
if echo 'int main(void){return 0;}' | "$cc" -x c - -fsanitize=address,undefined -o build/.asan-probe 2>/dev/null; then
  flags+=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
fi
"$cc" "${flags[@]}" -o build/test_plugin tests/test_plugin.c src/plugin.c src/kwop.c src/json.c
exec build/test_plugin
