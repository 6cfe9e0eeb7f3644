package io.accel4j.cli;

/**
 * A failure the user can act on, whose message is already the one clear line to show them (what went wrong and
 * what to do). {@link Main} prints it after {@code accel4j: error: } and exits with 1; no stack trace unless
 * {@code --debug}.
 */
public class CliException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public CliException(String message) {
        super(message);
    }

    public CliException(String message, Throwable cause) {
        super(message, cause);
    }
}
