package io.accel4j.cuda.bindings;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Generates, from binding classes in jextract's shape, a C file that only compiles if the bindings agree with the
 * real header, and compiles it with gcc. Per bound function (a holder class with {@code PROTOTYPE} and {@code DESC}):
 * <ul>
 *   <li>{@code #ifdef name / #error}: the bound name must not be a macro (the header maps API names to versioned
 *       symbols with macros; binding the macro's name would call the old symbol);</li>
 *   <li>{@code RET (*const p_name)(PARAMS) = name;}: the prototype string must match the header's declaration
 *       (with {@code -Werror}, any other parameter or return type is an incompatible pointer type);</li>
 *   <li>per parameter and the return value, {@code _Static_assert(sizeof(type) == size of the Java layout)} and
 *       the kind of type ({@code __builtin_classify_type}, gcc and clang): pointer iff {@code ADDRESS}, floating
 *       point iff {@code float}/{@code double}, integer (or enum) otherwise.</li>
 * </ul>
 * Plus {@code _Static_assert(NAME == value)} for every {@code int} constant, {@code sizeof} for every typedef
 * layout (a {@code MemoryLayout} constant named after its C type), and for a struct layout {@code offsetof} of every
 * named member (the member names are the C field names).
 */
final class HeaderCheck {

    private HeaderCheck() {}

    /** One bound function, read from its holder class. */
    /**
     * @param declaredAs the name the header declares this prototype under, when it differs from the symbol bound
     *                   (a holder's {@code DECLARED_AS}: {@code cuEventElapsedTime}, the unversioned symbol every
     *                   driver exports, is a macro for {@code cuEventElapsedTime_v2} in CUDA 12.8+ headers); null
     *                   when the same
     */
    record Function(String name, String prototype, FunctionDescriptor descriptor, String declaredAs) {
        Function(String name, String prototype, FunctionDescriptor descriptor) {
            this(name, prototype, descriptor, null);
        }
    }

    /** A C declaration split up: return type, name, and each parameter's type (names dropped). */
    record Prototype(String returnType, String name, List<String> parameterTypes) {}

    private static final Pattern PROTOTYPE = Pattern.compile("^(.+?)\\s*\\b(\\w+)\\((.*)\\)$");
    private static final Pattern PARAMETER = Pattern.compile("^(.*?)\\s*\\b(\\w+)$");

    private static final Map<String, String> C_LAYOUTS = Map.of(
            "C_CHAR", "char", "C_INT", "int", "C_LONG", "long", "C_LONG_LONG", "long long",
            "C_FLOAT", "float", "C_DOUBLE", "double", "C_POINTER", "void *");

    static Prototype parse(String prototype) {
        Matcher m = PROTOTYPE.matcher(prototype.strip());
        if (!m.matches()) {
            throw new IllegalArgumentException("not a C prototype: " + prototype);
        }
        List<String> types = new ArrayList<>();
        String params = m.group(3).strip();
        if (!params.equals("void") && !params.isEmpty()) {
            for (String p : params.split(",")) {
                Matcher pm = PARAMETER.matcher(p.strip());
                if (!pm.matches() || pm.group(1).isBlank()) {
                    throw new IllegalArgumentException("parameter without a type and a name: '" + p + "' in " + prototype);
                }
                types.add(pm.group(1).strip());
            }
        }
        return new Prototype(m.group(1).strip(), m.group(2), types);
    }

    /** The holders of {@code bindings} and their superclasses (jextract's split classes), in declaration order. */
    static List<Function> functions(Class<?> bindings) throws ReflectiveOperationException {
        List<Function> out = new ArrayList<>();
        for (Class<?> c = bindings; c != null && c != Object.class; c = c.getSuperclass()) {
            for (Class<?> holder : c.getDeclaredClasses()) {
                Optional<Field> proto = Arrays.stream(holder.getDeclaredFields())
                        .filter(f -> f.getName().equals("PROTOTYPE")).findFirst();
                if (proto.isEmpty()) {
                    continue;
                }
                Field desc = holder.getDeclaredField("DESC");
                proto.get().setAccessible(true);
                desc.setAccessible(true);
                Optional<Field> declaredAs = Arrays.stream(holder.getDeclaredFields())
                        .filter(f -> f.getName().equals("DECLARED_AS")).findFirst();
                String as = null;
                if (declaredAs.isPresent()) {
                    declaredAs.get().setAccessible(true);
                    as = (String) declaredAs.get().get(null);
                }
                out.add(new Function(holder.getSimpleName(), (String) proto.get().get(null),
                        (FunctionDescriptor) desc.get(null), as));
            }
        }
        return out;
    }

    /** Java-side consistency: the prototype's shape matches the descriptor and the public static method. */
    static void checkJavaSide(Class<?> bindings, Function f) {
        Prototype p = parse(f.prototype());
        assertThat(p.name()).as("symbol in the prototype of holder %s", f.name()).isEqualTo(f.name());
        List<MemoryLayout> args = f.descriptor().argumentLayouts();
        assertThat(args).as("%s: parameters in the descriptor vs the prototype", f.name())
                .hasSize(p.parameterTypes().size());
        for (int i = 0; i < args.size(); i++) {
            // A '*' means a pointer; opaque handles (CUstream) are pointers too, which only the C check can tell.
            if (p.parameterTypes().get(i).contains("*")) {
                assertThat(args.get(i)).as("%s parameter %d (%s)", f.name(), i, p.parameterTypes().get(i))
                        .isInstanceOf(AddressLayout.class);
            }
        }
        Class<?>[] carriers = args.stream().map(HeaderCheck::carrier).toArray(Class<?>[]::new);
        Method m;
        try {
            m = bindings.getMethod(f.name(), carriers);
        } catch (NoSuchMethodException e) {
            throw new AssertionError("no public method " + f.name() + Arrays.toString(carriers) + " in " + bindings, e);
        }
        assertThat(Modifier.isStatic(m.getModifiers())).as("%s is static", f.name()).isTrue();
        Class<?> ret = f.descriptor().returnLayout().<Class<?>>map(HeaderCheck::carrier).orElse(void.class);
        assertThat(m.getReturnType()).as("%s return type", f.name()).isEqualTo(ret);
    }

    /** The Java type a layout is passed as: its carrier, or {@code MemorySegment} for a struct by value. */
    private static Class<?> carrier(MemoryLayout l) {
        return l instanceof ValueLayout v ? v.carrier() : MemorySegment.class;
    }

    /** The C source checking {@code functions} and the constants and typedef layouts of {@code bindings}. */
    static String source(String header, Class<?> bindings, List<Function> functions) throws IllegalAccessException {
        return source(header, bindings, functions, Map.of());
    }

    /**
     * As {@link #source(String, Class, List)}, with versioned structs: for a struct layout named in
     * {@code versionedStructs} (C type → preprocessor condition, e.g. {@code NCCL_VERSION_CODE >= 22800}) the checks
     * are compiled only when the condition holds, and its size is checked as a lower bound ({@code >=}), since such
     * structs only grow at the end in later releases (NCCL's {@code ncclConfig_t}).
     */
    static String source(String header, Class<?> bindings, List<Function> functions,
                         Map<String, String> versionedStructs) throws IllegalAccessException {
        StringBuilder c = new StringBuilder();
        c.append("/* generated by HeaderCheck from ").append(bindings.getName()).append(" */\n");
        c.append("#include <stddef.h>\n#include <").append(header).append(">\n\n");
        for (Function f : functions) {
            Prototype p = parse(f.prototype());
            String cName = f.declaredAs() == null ? p.name() : f.declaredAs();
            c.append("/* ").append(f.prototype())
                    .append(f.declaredAs() == null ? "" : " (declared as " + f.declaredAs() + ")").append(" */\n");
            c.append("#ifdef ").append(cName).append("\n#error \"").append(cName)
                    .append(" is a macro: bind the versioned symbol it expands to\"\n#endif\n");
            String params = f.prototype().substring(f.prototype().indexOf('(') + 1, f.prototype().lastIndexOf(')'));
            c.append(p.returnType()).append(" (*const p_").append(p.name()).append(")(").append(params)
                    .append(") = ").append(cName).append(";\n");
            f.descriptor().returnLayout().ifPresent(l -> typeCheck(c, p.returnType(), l, p.name() + " return"));
            List<MemoryLayout> args = f.descriptor().argumentLayouts();
            for (int i = 0; i < args.size(); i++) {
                typeCheck(c, p.parameterTypes().get(i), args.get(i), p.name() + " parameter " + i);
            }
            c.append('\n');
        }
        for (Class<?> k = bindings; k != null && k != Object.class; k = k.getSuperclass()) {
            for (Field field : k.getDeclaredFields()) {
                int mod = field.getModifiers();
                if (!Modifier.isStatic(mod) || !Modifier.isPublic(mod)) {
                    continue;
                }
                if (field.getType() == int.class) {
                    c.append("_Static_assert(").append(field.getName()).append(" == ").append(field.getInt(null))
                            .append(", \"").append(field.getName()).append(" == ").append(field.getInt(null))
                            .append(" in Java\");\n");
                } else if (MemoryLayout.class.isAssignableFrom(field.getType())) {
                    MemoryLayout l = (MemoryLayout) field.get(null);
                    String type = C_LAYOUTS.getOrDefault(field.getName(), field.getName());
                    String guard = versionedStructs.get(type);
                    if (guard != null) {
                        c.append("#if ").append(guard).append('\n');
                    }
                    c.append("_Static_assert(sizeof(").append(type).append(guard == null ? ") == " : ") >= ")
                            .append(l.byteSize()).append(", \"layout ").append(field.getName())
                            .append(guard == null ? " is " : " is at least ").append(l.byteSize())
                            .append(" bytes in Java\");\n");
                    if (l instanceof StructLayout struct) {
                        offsets(c, type, struct);
                    }
                    if (guard != null) {
                        c.append("#endif\n");
                    }
                }
            }
        }
        return c.toString();
    }

    /** {@code _Static_assert(offsetof(type, member) == offset)} for every named member of {@code struct}. */
    private static void offsets(StringBuilder c, String type, StructLayout struct) {
        for (MemoryLayout member : struct.memberLayouts()) {
            if (member instanceof PaddingLayout || member.name().isEmpty()) {
                continue;
            }
            String name = member.name().get();
            long offset = struct.byteOffset(MemoryLayout.PathElement.groupElement(name));
            c.append("_Static_assert(offsetof(").append(type).append(", ").append(name).append(") == ")
                    .append(offset).append(", \"").append(type).append('.').append(name).append(" is at ")
                    .append(offset).append(" in Java\");\n");
        }
    }

    /** gcc's {@code __builtin_classify_type} classes: integer (enums too), pointer, floating point. */
    private static final int INTEGER_CLASS = 1;
    private static final int POINTER_CLASS = 5;
    private static final int REAL_CLASS = 8;

    private static void typeCheck(StringBuilder c, String type, MemoryLayout layout, String what) {
        c.append("_Static_assert(sizeof(").append(type).append(") == ").append(layout.byteSize()).append(", \"")
                .append(what).append(" (").append(type).append(") is ").append(layout.byteSize())
                .append(" bytes in Java\");\n");
        if (layout instanceof GroupLayout) {
            return; // a struct by value: the function pointer check already compares the type
        }
        int kind;
        String kindName;
        if (layout instanceof AddressLayout) {
            kind = POINTER_CLASS;
            kindName = "a pointer";
        } else if (layout instanceof ValueLayout v && (v.carrier() == float.class || v.carrier() == double.class)) {
            kind = REAL_CLASS;
            kindName = "floating point";
        } else {
            kind = INTEGER_CLASS;
            kindName = "an integer";
        }
        c.append("_Static_assert(__builtin_classify_type((").append(type).append(")0) == ").append(kind)
                .append(", \"").append(what).append(" (").append(type).append(") is ").append(kindName)
                .append(" in Java\");\n");
    }

    /** The result of a gcc run. */
    record Compiled(int exitCode, String output) {}

    /** {@code gcc -std=c11 -Wall -Werror -fsyntax-only -I include… file}. */
    static Compiled compile(String gcc, List<Path> includes, Path file) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(gcc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only"));
        includes.forEach(i -> command.add("-I" + i));
        command.add(file.toString());
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("gcc did not finish in 60 s on " + file);
        }
        return new Compiled(p.exitValue(), new String(out, StandardCharsets.UTF_8));
    }

    /** The first executable {@code name} on {@code PATH}. */
    static Optional<Path> onPath(String name) {
        String path = System.getenv("PATH");
        if (path == null) {
            return Optional.empty();
        }
        return Arrays.stream(path.split(":")).filter(s -> !s.isBlank()).map(s -> Path.of(s, name))
                .filter(Files::isExecutable).findFirst();
    }

    /**
     * The folder holding {@code header}: {@code $CUDA_HOME/include}, {@code $CUDA_PATH/include}, nvcc's
     * {@code ../include}, {@code /usr/local/cuda/include}, then {@code extra}.
     */
    static Optional<Path> includeDir(String header, List<Path> extra) {
        List<Path> candidates = new ArrayList<>();
        for (String var : List.of("CUDA_HOME", "CUDA_PATH")) {
            String v = System.getenv(var);
            if (v != null && !v.isBlank()) {
                candidates.add(Path.of(v, "include"));
            }
        }
        onPath("nvcc").map(n -> {
            try {
                return n.toRealPath().getParent().resolveSibling("include");
            } catch (IOException e) {
                return null;
            }
        }).ifPresent(candidates::add);
        candidates.add(Path.of("/usr/local/cuda/include"));
        candidates.addAll(extra);
        return candidates.stream().filter(d -> Files.isRegularFile(d.resolve(header))).findFirst();
    }
}
