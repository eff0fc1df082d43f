# Writes OUTPUT: a C++ file defining rtce::kDemoPage / kDemoPageSize with INPUT's bytes.
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <cstddef>\nnamespace rtce {\nextern const unsigned char kDemoPage[] = {${bytes} 0};\nextern const size_t kDemoPageSize = ${size};\n}\n")
