package dev.spindle.backend.ffm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Optional;

/**
 * The one place FFM downcalls are made: a native library opened by one of its names,
 * and handles to its functions. A missing library or symbol names itself.
 */
public final class NativeLibrary {
    private final String name;
    private final SymbolLookup lookup;

    private NativeLibrary(String name, SymbolLookup lookup) {
        this.name = name;
        this.lookup = lookup;
    }

    /** The first of {@code names} (e.g. libcuda.so.1) the system loader finds, if any. */
    public static Optional<NativeLibrary> open(List<String> names) {
        for (String n : names) {
            try {
                return Optional.of(new NativeLibrary(n, SymbolLookup.libraryLookup(n, Arena.global())));
            } catch (IllegalArgumentException notFound) {
                // try the next name
            }
        }
        return Optional.empty();
    }

    public MethodHandle function(String symbol, FunctionDescriptor descriptor) {
        return lookup.find(symbol).map(s -> Linker.nativeLinker().downcallHandle(s, descriptor))
                .orElseThrow(() -> new UnsatisfiedLinkError(name + " has no symbol " + symbol));
    }

    public String name() {
        return name;
    }
}
