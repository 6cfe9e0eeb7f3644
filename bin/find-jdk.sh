# shellcheck shell=bash
# Finds a JDK >= 25 for accel4j. Sourced by bin/accel4j and .ci/run; defines functions and sets no shell options.
#
#   source bin/find-jdk.sh
#   JAVA_HOME=$(accel4j_find_jdk) || exit 1
#
# Order: $JAVA_HOME when it is a JDK >= 25; otherwise the newest JDK >= 25 among the folders Linux distributions
# (and a few installers) put JDKs in. ACCEL4J_JDK_SEARCH_PATH (folders separated by ':') replaces those folders.

ACCEL4J_MIN_JDK=25

# Prints the version (e.g. 25.0.3) of the JDK whose home is $1; fails when $1 holds no java and javac.
accel4j_jdk_version() {
  local home=$1 v=""
  [[ -x "$home/bin/java" && -x "$home/bin/javac" ]] || return 1
  if [[ -f "$home/release" ]]; then
    v=$(sed -n 's/^JAVA_VERSION="\([^"]*\)".*/\1/p' "$home/release" | head -n 1)
  fi
  if [[ -z "$v" ]]; then
    v=$("$home/bin/java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
  fi
  [[ -n "$v" ]] || return 1
  printf '%s\n' "$v"
}

# Prints the feature (major) version of a Java version string: 25.0.3 -> 25, 1.8.0_292 -> 8, 26-ea -> 26.
accel4j_jdk_major() {
  local v=$1
  [[ $v == 1.* ]] && v=${v#1.}
  v=${v%%[!0-9]*}
  printf '%s\n' "${v:-0}"
}

# The folders searched, one per line: each may be a JDK home or hold JDK homes.
accel4j_jdk_search_dirs() {
  if [[ -n "${ACCEL4J_JDK_SEARCH_PATH-}" ]]; then
    tr ':' '\n' <<< "$ACCEL4J_JDK_SEARCH_PATH"
    return 0
  fi
  printf '%s\n' /usr/lib/jvm /usr/java /opt/java /usr/local/lib/jvm "${HOME:-/nonexistent}/.sdkman/candidates/java" \
    "${HOME:-/nonexistent}/.jdks" /Library/Java/JavaVirtualMachines
  # The JDK of the java on PATH, if any.
  local java
  if java=$(command -v java 2>/dev/null); then
    java=$(readlink -f "$java" 2>/dev/null || printf '%s' "$java")
    printf '%s\n' "$(dirname "$(dirname "$java")")"
  fi
}

# Prints the JDK home to use, or fails with one line on stderr saying what to install.
accel4j_find_jdk() {
  local v note="" dir home best="" bestv=""
  if [[ -n "${JAVA_HOME-}" ]]; then
    if v=$(accel4j_jdk_version "$JAVA_HOME"); then
      if (( $(accel4j_jdk_major "$v") >= ACCEL4J_MIN_JDK )); then
        printf '%s\n' "$JAVA_HOME"
        return 0
      fi
      note="JAVA_HOME=$JAVA_HOME is JDK $v"
    else
      note="JAVA_HOME=$JAVA_HOME is not a JDK"
    fi
  fi
  while IFS= read -r dir; do
    [[ -n "$dir" && -d "$dir" ]] || continue
    for home in "$dir" "$dir"/* "$dir"/*/Contents/Home; do
      v=$(accel4j_jdk_version "$home") || continue
      (( $(accel4j_jdk_major "$v") >= ACCEL4J_MIN_JDK )) || continue
      if [[ -z "$bestv" || "$(printf '%s\n%s\n' "$bestv" "$v" | sort -V | tail -n 1)" == "$v" && "$v" != "$bestv" ]]; then
        best=$home
        bestv=$v
      fi
    done
  done < <(accel4j_jdk_search_dirs)
  if [[ -n "$best" ]]; then
    [[ -z "$note" ]] || echo "accel4j: $note; using $best (JDK $bestv)" >&2
    printf '%s\n' "$best"
    return 0
  fi
  local searched
  searched=$(accel4j_jdk_search_dirs | paste -sd ' ' -)
  echo "accel4j: error: no JDK $ACCEL4J_MIN_JDK or newer found (${note:-JAVA_HOME is not set}; searched: $searched)." \
    "Install one - Debian/Ubuntu: 'sudo apt-get install openjdk-$ACCEL4J_MIN_JDK-jdk', or temurin-$ACCEL4J_MIN_JDK-jdk" \
    "from Adoptium's repository (https://adoptium.net/installation/linux/) - or set JAVA_HOME to a JDK $ACCEL4J_MIN_JDK." >&2
  return 1
}
