# Sourced by ./spindle and ./run-tests: points JAVA_HOME at a JDK 25 (FFM final, Vector API).
# Order: $JAVA_HOME if it is 25 or newer, then the JDKs installed under /usr/lib/jvm and
# /Library/Java/JavaVirtualMachines, then `java` on the PATH.
spindle_java_version() { "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'; }
spindle_find_jdk() {
  local c v
  for c in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25* /usr/lib/jvm/*25* /usr/lib/jvm/* \
           /Library/Java/JavaVirtualMachines/*/Contents/Home "$(dirname "$(dirname "$(readlink -f "$(command -v java 2>/dev/null || echo /nonexistent)")")")"; do
    [ -n "$c" ] && [ -x "$c/bin/java" ] && [ -x "$c/bin/javac" ] || continue
    v=$(spindle_java_version "$c")
    if [ -n "$v" ] && [ "${v%%.*}" -ge 25 ] 2>/dev/null; then echo "$c"; return 0; fi
  done
  return 1
}
JAVA_HOME=$(spindle_find_jdk) || { echo "spindle: needs a JDK 25 or newer (none found in JAVA_HOME, /usr/lib/jvm or on the PATH)" >&2; exit 1; }
export JAVA_HOME
