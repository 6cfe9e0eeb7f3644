package io.accel4j.cli.train;

import io.accel4j.train.TrainConfig;
import io.accel4j.train.data.SampleOrder;

/** The picocli converters of {@code train}'s enumerated flags, each naming the values it takes when refusing one. */
final class TrainConverters {

    private TrainConverters() {}

    /** {@code constant|cosine}, case-insensitive. */
    static final class Schedules implements picocli.CommandLine.ITypeConverter<TrainConfig.Schedule> {
        @Override
        public TrainConfig.Schedule convert(String s) {
            return switch (s.toLowerCase(java.util.Locale.ROOT)) {
                case "constant" -> TrainConfig.Schedule.CONSTANT;
                case "cosine" -> TrainConfig.Schedule.COSINE;
                default -> throw new picocli.CommandLine.TypeConversionException("'" + s
                        + "' is not a schedule: constant or cosine");
            };
        }
    }

    /** {@code sequential|shuffled}, case-insensitive. */
    static final class Orders implements picocli.CommandLine.ITypeConverter<SampleOrder.Mode> {
        @Override
        public SampleOrder.Mode convert(String s) {
            return switch (s.toLowerCase(java.util.Locale.ROOT)) {
                case "sequential" -> SampleOrder.Mode.SEQUENTIAL;
                case "shuffled" -> SampleOrder.Mode.SHUFFLED;
                default -> throw new picocli.CommandLine.TypeConversionException("'" + s
                        + "' is not a data order: sequential or shuffled");
            };
        }
    }
}
