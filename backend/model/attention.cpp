#include "model/attention.h"
