#!/usr/bin/env bash
# Packs what the GPU machine needs (it has no Java) into two git-ignored folders, each carried alone
# because the working tree plus a carry must stay under 64 MiB:
#   .dist/         the CUDA tests and the benchmark: a jlink'd JDK 25 runtime, Spindle's classes with the
#                  fatbin, the CLI's libraries (picocli, Jackson), the backend test classes, JUnit's console
#                  launcher (carry: [".dist"]; scripts/device-run.sh tests | bench)
#   .dist-server/  the packaged server (target/quarkus-app) and the same runtime
#                  (carry: [".dist-server"]; scripts/device-run.sh serve-check)
# The runtime's modules are uncompressed and the server's jars re-stored without compression, so that
# xz compresses everything at once (about 15 + 16 MiB instead of 26 + 31 MiB).
# With --base REV, .dist/base-classes also holds the classes and kernels of commit REV, for an A/B of
# the benchmark inside one device call (scripts/device-run.sh ab ...): figures move by up to 5%
# between calls, so a change is only measured against its base in the same call.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/jdk25.sh
base=""
if [ "${1:-}" = "--base" ]; then base="$2"; fi
mvn -B -q -ntp -DskipTests package
mvn -B -q -ntp dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:6.0.3 -DoutputDirectory=.dist/lib
mvn -B -q -ntp dependency:copy-dependencies -DincludeArtifactIds=picocli,jackson-databind,jackson-core,jackson-annotations \
  -DincludeScope=runtime -DoutputDirectory=.dist/lib
rm -rf .dist/classes .dist/test-classes .dist/*.txz .dist-server /tmp/jre25 /tmp/spindle-server
mkdir -p .dist/classes .dist/test-classes .dist-server
cp -r target/classes/dev target/classes/cuda target/classes/*.properties .dist/classes/ 2>/dev/null || cp -r target/classes/dev target/classes/cuda .dist/classes/
(cd target/test-classes && cp -r --parents dev/spindle/backend dev/spindle/engine/sched dev/spindle/engine/ChatModelParityTest*.class dev/spindle/sample dev/spindle/Fixture*.class dev/spindle/Trials*.class ../../.dist/test-classes/)
# the modules the server (Quarkus: jar file system, JMX, JNDI names) needs; the tests and the bench need fewer
"$JAVA_HOME/bin/jlink" --add-modules java.base,java.logging,java.management,java.naming,jdk.management,jdk.unsupported,jdk.incubator.vector,jdk.zipfs,jdk.httpserver \
  --strip-java-debug-attributes --no-header-files --no-man-pages --compress zip-0 --output /tmp/jre25 2>/dev/null
if command -v strip >/dev/null; then strip --strip-unneeded /tmp/jre25/lib/server/libjvm.so; fi
tar cf - -C /tmp jre25 | xz -9 -T0 > .dist/jre.txz && rm -rf /tmp/jre25
cp .dist/jre.txz .dist-server/jre.txz
# the server, its tokenizer library cut to the Linux x86-64 native
cp -r target/quarkus-app /tmp/spindle-server
zip -q -d /tmp/spindle-server/lib/main/ai.djl.huggingface.tokenizers-*.jar 'native/lib/linux-aarch64/*' 'native/lib/win-x86_64/*' 'native/lib/osx-*' || true
python3 - <<'PY'
import glob, os, zipfile
for jar in glob.glob('/tmp/spindle-server/**/*.jar', recursive=True):
    with zipfile.ZipFile(jar) as zi, zipfile.ZipFile(jar + '.tmp', 'w', zipfile.ZIP_STORED) as zo:
        seen = set()
        for info in zi.infolist():
            if info.filename in seen:
                continue
            seen.add(info.filename)
            data = zi.read(info.filename)
            info.compress_type = zipfile.ZIP_STORED
            zo.writestr(info, data)
    os.replace(jar + '.tmp', jar)
PY
tar cf - -C /tmp spindle-server | xz -9 -T0 > .dist-server/server.txz && rm -rf /tmp/spindle-server
rm -rf .dist/base-classes
if [ -n "$base" ]; then
  tree="$(mktemp -d)/spindle-base"
  git worktree add -q --detach "$tree" "$base"
  (cd "$tree" && mvn -B -q -ntp -DskipTests compile)
  mkdir -p .dist/base-classes && cp -r "$tree"/target/classes/dev "$tree"/target/classes/cuda .dist/base-classes/
  # the logging setup (without it the CLI says "logging setup failed"), where REV has it
  cp "$tree"/target/classes/*.properties .dist/base-classes/ 2>/dev/null || true
  git worktree remove --force "$tree"
fi
du -sh .dist/* .dist-server/*
