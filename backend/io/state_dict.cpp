#include "io/state_dict.h"
