package io.accel4j.cli.launch;

/**
 * A stand-in rank for {@link LaunchCommandTest}: rank 1 prints a line and exits with code 3 after 300 ms; every
 * other rank would sleep two minutes (the launcher must stop it).
 */
public final class FakeRank {

    private FakeRank() {}

    public static void main(String[] args) throws InterruptedException {
        int rank = Integer.parseInt(System.getenv("RANK"));
        System.out.println("fake rank " + rank + " of " + System.getenv("WORLD_SIZE") + " at "
                + System.getenv("MASTER_ADDR") + ":" + System.getenv("MASTER_PORT") + " local "
                + System.getenv("LOCAL_RANK") + "/" + System.getenv("LOCAL_WORLD_SIZE") + " args " + String.join(" ", args));
        if (rank == 1) {
            Thread.sleep(300);
            System.err.println("rank 1 gives up");
            System.exit(3);
        }
        Thread.sleep(120_000);
    }
}
