package io.accel4j.cli.bench;

import java.util.function.Function;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * A picocli converter over a parse function: its {@link IllegalArgumentException} message becomes the usage error
 * (exit 2). picocli instantiates converters by class, so each option type gets a one-line subclass.
 */
abstract class ParsingConverter<T> implements ITypeConverter<T> {

    private final Function<String, T> parse;

    ParsingConverter(Function<String, T> parse) {
        this.parse = parse;
    }

    @Override
    public final T convert(String value) {
        try {
            return parse.apply(value);
        } catch (IllegalArgumentException e) {
            throw new TypeConversionException(e.getMessage());
        }
    }
}
