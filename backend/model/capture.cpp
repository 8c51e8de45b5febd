#include "model/capture.h"
