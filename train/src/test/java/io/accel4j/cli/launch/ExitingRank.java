package io.accel4j.cli.launch;

/**
 * A stand-in rank for {@link LaunchCommandTest}'s {@code --keep-going}: rank 1 exits with code 3 at once, the others
 * print that they finished after 1.5 s (a launcher that stopped them would cut that line) and exit 0.
 */
public final class ExitingRank {

    private ExitingRank() {}

    public static void main(String[] args) throws InterruptedException {
        int rank = Integer.parseInt(System.getenv("RANK"));
        if (rank == 1) {
            System.err.println("rank 1 exits");
            System.exit(3);
        }
        Thread.sleep(1500);
        System.out.println("rank " + rank + " finished");
    }
}
