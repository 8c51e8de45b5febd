#include "colormap.h"
