# Installs the system libraries the build needs (Debian), when they are missing.
if ! pkg-config --exists libargon2 2>/dev/null || ! pkg-config --exists sqlite3 2>/dev/null; then
    echo "Installing libargon2-dev and libsqlite3-dev…" >&2
    sudo_cmd=""
    if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq libargon2-dev libsqlite3-dev pkg-config >/dev/null
fi
