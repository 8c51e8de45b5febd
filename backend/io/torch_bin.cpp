#include "io/torch_bin.h"
