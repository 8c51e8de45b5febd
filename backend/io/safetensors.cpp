#include "io/safetensors.h"
