package dev.spindle.tokenizer;

/** A tokenizer.json or tokenizer_config.json that cannot be used; the message names the file. */
public final class TokenizerException extends RuntimeException {
    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }

    public TokenizerException(String message) {
        super(message);
    }
}
