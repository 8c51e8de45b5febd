#include "io/pickle.h"
