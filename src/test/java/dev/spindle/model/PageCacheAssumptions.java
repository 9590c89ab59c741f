package dev.spindle.model;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** What a test of the page cache needs: Linux's page-cache calls, and a folder on a disk (tmpfs keeps files in memory). */
public final class PageCacheAssumptions {
    private PageCacheAssumptions() {
    }

    public static void assumeDroppableFrom(Path dir) throws IOException {
        assumeTrue(PageCache.unsupportedReason().isEmpty(), () -> PageCache.unsupportedReason().orElseThrow());
        String type = Files.getFileStore(dir).type();
        assumeFalse(type.equals("tmpfs") || type.equals("ramfs"), "the temporary folder is on " + type + ", which keeps files in memory");
    }
}
