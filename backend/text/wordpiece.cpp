#include "text/wordpiece.h"
