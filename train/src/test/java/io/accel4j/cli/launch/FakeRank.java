package io.accel4j.cli.launch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A stand-in rank for {@link LaunchCommandTest}, given a folder: every rank prints a line and leaves a marker file
 * there; rank 1 then waits (up to 30 s) until every rank has, prints to stderr and exits with code 3; the others
 * would sleep two minutes (the launcher must stop them).
 */
public final class FakeRank {

    private FakeRank() {}

    public static void main(String[] args) throws InterruptedException, IOException {
        int rank = Integer.parseInt(System.getenv("RANK")), size = Integer.parseInt(System.getenv("WORLD_SIZE"));
        System.out.println("fake rank " + rank + " of " + size + " at " + System.getenv("MASTER_ADDR") + ":"
                + System.getenv("MASTER_PORT") + " local " + System.getenv("LOCAL_RANK") + "/"
                + System.getenv("LOCAL_WORLD_SIZE") + " args " + String.join(" ", args));
        System.out.flush();
        Path dir = Path.of(args[0]);
        Files.writeString(dir.resolve("rank" + rank), "here");
        if (rank == 1) {
            for (int i = 0; i < 300 && !allThere(dir, size); i++) {
                Thread.sleep(100);
            }
            System.err.println("rank 1 gives up");
            System.exit(3);
        }
        Thread.sleep(120_000);
    }

    private static boolean allThere(Path dir, int size) {
        for (int r = 0; r < size; r++) {
            if (!Files.exists(dir.resolve("rank" + r))) {
                return false;
            }
        }
        return true;
    }
}
