#include "io/hdf5_store.h"
