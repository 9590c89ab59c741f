#!/usr/bin/env bash
# Packs what the GPU machine needs to run the CUDA tests and the benchmark (it has no Java):
# a jlink'd JDK 25 runtime, Spindle's classes with the fatbin, the CLI's libraries (picocli,
# Jackson), the backend test classes and JUnit's console launcher, into the git-ignored .dist/
# (carry it: `carry: [".dist"]`). Then run there (scripts/device-run.sh does both):
#   tests: java -jar .dist/lib/junit-platform-console-standalone-*.jar execute \
#            --class-path .dist/classes:.dist/test-classes --select-package dev.spindle.backend.cuda
#   bench: java -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda ...
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/jdk25.sh
mvn -B -q -ntp -DskipTests test-compile
mvn -B -q -ntp dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:6.0.3 -DoutputDirectory=.dist/lib
mvn -B -q -ntp dependency:copy-dependencies -DincludeArtifactIds=picocli,jackson-databind,jackson-core,jackson-annotations \
  -DincludeScope=runtime -DoutputDirectory=.dist/lib
rm -rf .dist/classes .dist/test-classes .dist/jre.t?z /tmp/jre25
mkdir -p .dist/classes .dist/test-classes
cp -r target/classes/dev target/classes/cuda target/classes/*.properties .dist/classes/ 2>/dev/null || cp -r target/classes/dev target/classes/cuda .dist/classes/
(cd target/test-classes && cp -r --parents dev/spindle/backend dev/spindle/engine/sched dev/spindle/engine/ChatModelParityTest*.class dev/spindle/engine/sample dev/spindle/Fixture*.class ../../.dist/test-classes/)
"$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.incubator.vector,java.logging \
  --strip-debug --no-header-files --no-man-pages --compress zip-9 --output /tmp/jre25 2>/dev/null
tar cJf .dist/jre.txz -C /tmp jre25 && rm -rf /tmp/jre25
du -sh .dist/*
