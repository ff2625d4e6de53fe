// Debian puts libpq's headers under postgresql/; macOS (Homebrew) puts them on the include path.
#if __has_include(<postgresql/libpq-fe.h>)
#include <postgresql/libpq-fe.h>
#else
#include <libpq-fe.h>
#endif
