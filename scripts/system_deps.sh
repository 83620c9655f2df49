#!/usr/bin/env bash
# Debian packages the tests use, installed when missing (the tests start their own servers on loopback):
#   postgresql      the relay's shared store (tests run initdb/pg_ctl in a temp dir)
#   libxml2-utils   xmllint, which the lint test runs on package.xml
#   openssl         the relay TLS test makes a self-signed certificate
#   libgl1 libglib2.0-0 libfontconfig1 libdbus-1-3   what PyQt5's wheels load for the offscreen monitor test
#   libegl1 libegl-mesa0 libgl1-mesa-dri   MuJoCo's offscreen camera rendering (MUJOCO_GL=egl, Mesa in software)
#   libosmesa6      the OSMesa fallback when EGL cannot make a context
#   chromium chromium-driver   the web status page's browser test (headless Chromium driven by Selenium)
# Needs root (CI and the dev machines are root); elsewhere it says what to install and the tests that need
# them skip with that reason.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v xmllint >/dev/null 2>&1 || missing+=(libxml2-utils)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
for pkg in libgl1 libglib2.0-0 libfontconfig1 libdbus-1-3 libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup] not root or no apt-get: install ${missing[*]} yourself (their tests skip until then)"
  exit 0
fi
echo "[setup] apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
