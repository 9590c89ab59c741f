# Spindle's CPU image. Build:   mvn -DskipTests package && docker build -t spindle .
# Run:    docker run -p 8000:8000 -v /models/Nanbeige4.1-3B:/model spindle --model /model
# The bundled chat model is served when no --model is given.
FROM eclipse-temurin:25-jre
WORKDIR /opt/spindle
COPY target/quarkus-app/ app/
COPY models/spindle-chat-target/ models/spindle-chat-target/
EXPOSE 8000
ENTRYPOINT ["java", "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", \
            "-Djava.util.logging.manager=org.jboss.logmanager.LogManager", "-jar", "app/quarkus-run.jar", "serve"]
