package dev.spindle.server;

import dev.spindle.cli.SpindleCli;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.annotations.QuarkusMain;

/**
 * The entry point: {@code spindle serve ...} boots the Quarkus server; every other
 * command is the plain CLI (no framework started).
 */
@QuarkusMain
public final class Main {
    private Main() {
    }

    public static void main(String... args) {
        if (args.length > 0 && args[0].equals("serve")) {
            String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
            if (!ServeOptions.apply(rest)) {
                return;
            }
            Quarkus.run(rest);
            return;
        }
        SpindleCli.main(args);
    }
}
