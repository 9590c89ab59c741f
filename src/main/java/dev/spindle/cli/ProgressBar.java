package dev.spindle.cli;

import dev.spindle.model.LoadListener;

import java.io.PrintStream;

/** Weight-loading progress on the terminal (stderr), redrawn in place; silent when not a terminal. */
final class ProgressBar implements LoadListener {
    private final String label;
    private final PrintStream out;
    private final long startNanos = System.nanoTime();
    private long lastDraw;
    private long bytes;

    private ProgressBar(String label, PrintStream out) {
        this.label = label;
        this.out = out;
    }

    static ProgressBar forTerminal(String label) {
        java.io.Console console = System.console();
        return new ProgressBar(label, console != null && console.isTerminal() ? System.err : null);
    }

    @Override
    public synchronized void loaded(String tensor, long doneBytes, long totalBytes) {
        bytes = doneBytes;
        long now = System.nanoTime();
        if (out == null || (now - lastDraw < 100_000_000L && doneBytes < totalBytes)) {
            return;
        }
        lastDraw = now;
        int width = 30;
        int filled = (int) (width * doneBytes / Math.max(1, totalBytes));
        double secs = (now - startNanos) / 1e9;
        out.printf("\r%s [%s%s] %5.1f%% %.2f/%.2f GB %.1f GB/s ", label, "#".repeat(filled), " ".repeat(width - filled),
                100.0 * doneBytes / Math.max(1, totalBytes), doneBytes / 1e9, totalBytes / 1e9, doneBytes / 1e9 / Math.max(secs, 1e-9));
        out.flush();
    }

    void done() {
        if (out != null) {
            out.printf("%n");
        }
    }

    double seconds() {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    long bytes() {
        return bytes;
    }
}
