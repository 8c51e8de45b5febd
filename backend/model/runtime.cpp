#include "model/runtime.h"
