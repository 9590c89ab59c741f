# Spindle's image, built in two stages. Docker does not run on the development machines here,
# so this file is untested; the build stage needs Maven Central (and nvcc for the CUDA kernels).
#   docker build -t spindle .
#   docker run -p 8000:8000 -v /models/Nanbeige4.1-3B:/models/model:ro spindle --model /models/model
# Without --model it serves the bundled chat model.

FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
RUN apt-get update && apt-get install -y --no-install-recommends maven wget ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=eclipse-temurin:25-jdk /opt/java/openjdk /opt/jdk
ENV JAVA_HOME=/opt/jdk PATH=/opt/jdk/bin:$PATH
WORKDIR /src
COPY pom.xml ./
COPY scripts/ scripts/
COPY src/main/ src/main/
RUN mvn -B -q -DskipTests package

FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
COPY --from=eclipse-temurin:25-jre /opt/java/openjdk /opt/jre
RUN useradd --system --uid 10001 --home /opt/spindle spindle
WORKDIR /opt/spindle
COPY --from=build --chown=spindle /src/target/quarkus-app/ app/
COPY --chown=spindle models/spindle-chat-target/ models/spindle-chat-target/
USER 10001
EXPOSE 8000
ENTRYPOINT ["/opt/jre/bin/java", "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", \
            "-Djava.util.logging.manager=org.jboss.logmanager.LogManager", "-jar", "app/quarkus-run.jar", "serve"]
