#include "analysis/inspection_dump.h"
