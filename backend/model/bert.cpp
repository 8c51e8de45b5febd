#include "model/bert.h"
