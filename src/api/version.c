/* zbpp — the library's version (the headers carry theirs in zbpp/version.h). */
#include "zbpp/version.h"

const char *zb_version(void) { return ZB_VERSION_STRING; }
