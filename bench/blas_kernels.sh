# Sourced by the bench scripts (bash): which OpenBLAS kernels each side uses. The app may choose other
# kernels than the library picks by itself (docs/performance.md, "OpenBLAS's kernels"); a fair
# comparison then also times Python with the app's kernels (OPENBLAS_CORETYPE=$APP_BLAS).
# Needs APP (the outlierlens executable) and PY (Debian's python3) set. Sets APP_BLAS and PY_BLAS
# (empty when the BLAS is not OpenBLAS) and prints one line about them to stderr.
APP_BLAS="$(env -u OPENBLAS_CORETYPE "$APP" --version | sed -n 's/^BLAS: OpenBLAS, \([A-Za-z0-9]*\) kernels.*$/\1/p')"
PY_BLAS="$(env -u OPENBLAS_CORETYPE "$PY" -c 'import ctypes, torch
l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())' 2>/dev/null || true)"
echo "OpenBLAS kernels: app ${APP_BLAS:-none}, Python ${PY_BLAS:-none}" >&2
