#include "model/loading.h"
