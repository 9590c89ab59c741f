package dev.spindle.cli;

import dev.spindle.backend.cuda.CudaException;
import dev.spindle.chat.ChatTemplateException;
import dev.spindle.kv.KvCapacityException;
import dev.spindle.model.ModelLoadException;
import dev.spindle.tokenizer.TokenizerException;
import picocli.CommandLine.Command;
import picocli.CommandLine;

/** The {@code spindle} command line: one subcommand per job. */
@Command(name = "spindle", mixinStandardHelpOptions = true, version = "Spindle 0.1.0",
        description = "Serves llama-family models (Nanbeige 4.x) from their published bf16 safetensors.",
        subcommands = {ChatCommand.class, GenerateCommand.class, PromptCommand.class, BenchCommand.class, KlCommand.class, CommandLine.HelpCommand.class})
public final class SpindleCli implements Runnable {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public static void main(String[] args) {
        try (var in = SpindleCli.class.getResourceAsStream("/spindle-logging.properties")) {
            java.util.logging.LogManager.getLogManager().readConfiguration(in);
        } catch (java.io.IOException | NullPointerException e) {
            System.err.println("spindle: logging setup failed: " + e);
        }
        System.exit(run(args));
    }

    public static int run(String... args) {
        return new CommandLine(new SpindleCli())
                .setExecutionExceptionHandler(new ErrorHandler())
                .execute(args);
    }

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    /** Expected failures (bad model directory, bad arguments) print one clear line, not a stack trace. */
    static final class ErrorHandler implements CommandLine.IExecutionExceptionHandler {
        @Override
        public int handleExecutionException(Exception e, CommandLine cmd, CommandLine.ParseResult parsed) {
            if (e instanceof ModelLoadException || e instanceof IllegalArgumentException
                    || e instanceof KvCapacityException || e instanceof ChatTemplateException
                    || e instanceof TokenizerException || e instanceof CudaException) {
                cmd.getErr().println("spindle: " + e.getMessage());
                return 2;
            }
            throw new RuntimeException(e);
        }
    }
}
