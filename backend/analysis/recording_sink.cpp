#include "analysis/recording_sink.h"
