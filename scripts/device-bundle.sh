#!/usr/bin/env bash
# Packs what the GPU machine needs to run the CUDA kernel contract tests (it has no Java):
# a jlink'd JDK 25 runtime, the engine-core classes with the fatbin, the CUDA test classes and
# JUnit's console launcher, into the git-ignored .dist/ (carry it: `carry: [".dist"]`). Then run there:
#   tar xzf .dist/jre.tgz -C /tmp && /tmp/jre25/bin/java --add-modules jdk.incubator.vector \
#     --enable-native-access=ALL-UNNAMED -jar .dist/lib/junit-platform-console-standalone-*.jar execute \
#     --class-path .dist/classes:.dist/test-classes --select-class dev.spindle.backend.cuda.KernelContractTest
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/jdk25.sh
mvn -B -q -ntp -DskipTests test-compile
mvn -B -q -ntp dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:6.0.3 -DoutputDirectory=.dist/lib
rm -rf .dist/classes .dist/test-classes .dist/jre.tgz /tmp/jre25
mkdir -p .dist/classes .dist/test-classes
(cd target/classes && cp -r --parents dev/spindle/backend dev/spindle/model dev/spindle/engine/kv cuda ../../.dist/classes/)
(cd target/test-classes && cp -r --parents dev/spindle/backend/cuda ../../.dist/test-classes/)
"$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.incubator.vector,java.logging,java.management,jdk.unsupported \
  --strip-debug --no-header-files --no-man-pages --compress zip-9 --output /tmp/jre25 2>/dev/null
tar czf .dist/jre.tgz -C /tmp jre25 && rm -rf /tmp/jre25
du -sh .dist/*
