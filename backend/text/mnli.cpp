#include "text/mnli.h"
