//! The figures' bytes are reproducible and their text is there: in an SVG as
//! `<text>` elements, in a PNG as dark pixels where the labels go (and nowhere
//! there when the labels are empty).

use gpuq_plot::{Axis, Chart, Format, HeatMap, Legend, Series, MISSING};

fn chart(title: &str, x: &str, y: &str, legend: bool) -> Chart {
    let label = |s: &'static str| if legend { s } else { "" };
    let history: Vec<(f64, f64)> = (0..40)
        .map(|k| (k as f64, 0.6f64.powi(k) * (1.2 + (k as f64).sin())))
        .collect();
    Chart::new(title, Axis::new(x).integers(), Axis::log(y))
        .with(Series::line(label("recurrence residual"), history))
        .with(Series::markers(
            label("true residual at the end"),
            [(39.0, 3e-9)],
        ))
        .with(Series::horizontal(label("tolerance"), 1e-8))
}

fn map(title: &str, missing: bool) -> HeatMap {
    let n = 33;
    let values = (0..n * n)
        .map(|k| {
            let (i, j) = ((k % n) as f64, (k / n) as f64);
            let t = (i * i + 2.0 * j * j).sqrt();
            if missing && t > 35.0 {
                f64::NAN
            } else {
                t
            }
        })
        .collect();
    let mut m = HeatMap::new(
        title,
        ("x (mm)", "y (mm)"),
        (n, n),
        (0.0, 3.2, 0.0, 3.2),
        values,
        "activation time (ms)",
    )
    .unwrap();
    m.missing_label = "not activated".into();
    m
}

/// The trimmed contents of every `<text>` element.
fn svg_texts(svg: &[u8]) -> Vec<String> {
    let svg = std::str::from_utf8(svg).unwrap();
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find("<text") {
        let body = &rest[start..];
        let open = body.find('>').unwrap() + 1;
        let close = body.find("</text>").unwrap();
        out.push(body[open..close].trim().to_string());
        rest = &body[close..];
    }
    out
}

/// Width, height and RGB pixels of a PNG.
fn decode(png_bytes: &[u8]) -> (usize, usize, Vec<u8>) {
    let decoder = png::Decoder::new(png_bytes);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, buf)
}

/// Pixels darker than mid-grey in the box `x0..x1` x `y0..y1`.
fn dark(
    image: &(usize, usize, Vec<u8>),
    (x0, x1): (usize, usize),
    (y0, y1): (usize, usize),
) -> usize {
    let (w, _, px) = image;
    let mut n = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let p = &px[3 * (y * w + x)..3 * (y * w + x) + 3];
            if p.iter().map(|&c| c as u32).sum::<u32>() < 3 * 100 {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn the_same_figure_gives_the_same_bytes() {
    let c = chart("Residual history", "iteration", "relative residual", true);
    let m = map("Activation time", true);
    for format in [Format::Png, Format::Svg] {
        let a = c.render(format).unwrap();
        let b = c.clone().render(format).unwrap();
        assert_eq!(a, b, "{format:?} chart");
        // Another thread: no state of the first rendering leaks into the next.
        let c2 = c.clone();
        let from_thread = std::thread::spawn(move || c2.render(format).unwrap())
            .join()
            .unwrap();
        assert_eq!(a, from_thread, "{format:?} chart from another thread");
        assert_eq!(
            m.render(format).unwrap(),
            m.render(format).unwrap(),
            "{format:?} map"
        );
    }
    // And through files.
    let dir = std::env::temp_dir().join(format!("gpuq-plot-figures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (p, q) = (dir.join("a.png"), dir.join("b.svg"));
    c.save(&p).unwrap();
    m.save(&q).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), c.render(Format::Png).unwrap());
    assert_eq!(std::fs::read(&q).unwrap(), m.render(Format::Svg).unwrap());
    assert!(c.save(&dir.join("no/such/dir.png")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn svg_text_elements_hold_the_title_axes_ticks_and_legend() {
    let c = chart("Residual history", "iteration", "relative residual", true);
    let svg = c.render(Format::Svg).unwrap();
    assert!(svg.starts_with(b"<svg"));
    let texts = svg_texts(&svg);
    for want in [
        "Residual history",
        "iteration",
        "relative residual",
        "recurrence residual",
        "true residual at the end",
        "tolerance",
        "10⁻⁸",
        "10⁰",
        "0",
        "30",
    ] {
        assert!(
            texts.iter().any(|t| t == want),
            "no <text> '{want}' in {texts:?}"
        );
    }
    // The font named in the SVG, with a generic fallback.
    assert!(std::str::from_utf8(&svg)
        .unwrap()
        .contains("font-family=\"DejaVu Sans, sans-serif\""));
    // A label shared by two series is listed once.
    let band = Chart::new("SDOF", Axis::new("time t (s)"), Axis::new("x (m)"))
        .with(Series::line("mean", [(0.0, 0.0), (1.0, 1.0)]))
        .with(Series::dashed("mean ± 2 std", [(0.0, 1.0), (1.0, 2.0)]))
        .with(Series::dashed("mean ± 2 std", [(0.0, -1.0), (1.0, 0.0)]).colour(1));
    let texts = svg_texts(&band.render(Format::Svg).unwrap());
    assert_eq!(texts.iter().filter(|t| *t == "mean ± 2 std").count(), 1);
    assert_eq!(texts.iter().filter(|t| *t == "mean").count(), 1);

    let m = map("Activation time", true);
    let svg = m.render(Format::Svg).unwrap();
    let texts = svg_texts(&svg);
    for want in [
        "Activation time",
        "x (mm)",
        "y (mm)",
        "activation time (ms)",
        "not activated",
    ] {
        assert!(
            texts.iter().any(|t| t == want),
            "no <text> '{want}' in {texts:?}"
        );
    }
    // The map and the colour bar are embedded PNGs.
    assert_eq!(
        std::str::from_utf8(&svg)
            .unwrap()
            .matches("href=\"data:image/png;base64,")
            .count(),
        2
    );
    // No missing values, no legend entry for them.
    let texts = svg_texts(&map("Activation time", false).render(Format::Svg).unwrap());
    assert!(!texts.iter().any(|t| t == "not activated"));
}

#[test]
fn png_labels_are_drawn_where_they_belong() {
    let labelled = chart("Residual history", "iteration", "relative residual", true);
    let blank = chart("", "", "", false);
    let a = labelled.render(Format::Png).unwrap();
    let b = blank.render(Format::Png).unwrap();
    assert_ne!(a, b);
    let (a, b) = (decode(&a), decode(&b));
    assert_eq!((a.0, a.1), (1200, 750));
    // The title: a band at the top, centred.
    let title = ((400, 800), (0, 50));
    // The x axis's label: a band at the bottom, centred.
    let x_label = ((450, 750), (705, 750));
    // The y axis's label: a strip at the left edge, rotated.
    let y_label = ((0, 45), (200, 550));
    // The legend: the upper right corner of the plot.
    let legend = ((950, 1170), (60, 160));
    for (what, region) in [
        ("title", title),
        ("x label", x_label),
        ("y label", y_label),
        ("legend", legend),
    ] {
        let (x, y) = region;
        assert!(
            dark(&a, x, y) > 100,
            "no {what} drawn: {} dark pixels",
            dark(&a, x, y)
        );
        assert_eq!(dark(&b, x, y), 0, "{what} drawn without a label");
    }
    // Tick labels left of the y axis are there in both.
    let ticks = ((60, 135), (40, 680));
    assert!(dark(&a, ticks.0, ticks.1) > 100 && dark(&b, ticks.0, ticks.1) > 100);
}

#[test]
fn png_map_has_its_colour_bar_labels_and_missing_grey() {
    let m = map("Activation time", true);
    let png_bytes = m.render(Format::Png).unwrap();
    let image = decode(&png_bytes);
    let (w, h, px) = &image;
    // The colour bar's tick labels and label right of the bar.
    assert!(dark(&image, (w - 200, w - 10), (60, h - 120)) > 200);
    // Grey where the values are missing (the upper right of the map), viridis elsewhere.
    let grey = px.chunks(3).filter(|p| *p == MISSING).count();
    assert!(grey > 10_000, "{grey} grey pixels");
    let dark_purple = px
        .chunks(3)
        .filter(|p| *p == gpuq_plot::viridis(0.0))
        .count();
    assert!(dark_purple > 0);
    let blank = HeatMap {
        title: String::new(),
        x_label: String::new(),
        y_label: String::new(),
        colour_label: String::new(),
        missing_label: String::new(),
        ..m.clone()
    };
    assert_ne!(blank.render(Format::Png).unwrap(), png_bytes);
    let b = decode(&blank.render(Format::Png).unwrap());
    assert_eq!(dark(&b, (300, 700), (0, 40)), 0);
    assert!(dark(&image, (300, 700), (0, 40)) > 100);
}

#[test]
fn frames_and_errors() {
    let c = chart("t", "x", "y", true);
    let f = c.frame();
    assert!(f.y.0 <= 1e-9 && f.y.1 >= 1.0);
    let h = Chart::new("h", Axis::new("x").range(-1.0, 1.0), Axis::new("count"))
        .with(Series::bars("samples", [[-1.0, 0.0, 3.0], [0.0, 1.0, 5.0]]))
        .legend(Legend::Hidden);
    let f = h.frame();
    assert_eq!(f.x, (-1.0, 1.0));
    assert_eq!(f.y.0, 0.0);
    assert!(f.y.1 > 5.0);
    assert!(!svg_texts(&h.render(Format::Svg).unwrap()).contains(&"samples".to_string()));
    assert!(HeatMap::new(
        "m",
        ("x", "y"),
        (2, 2),
        (0.0, 1.0, 0.0, 1.0),
        vec![1.0; 3],
        "c"
    )
    .is_err());
    assert!(HeatMap::new("m", ("x", "y"), (0, 2), (0.0, 1.0, 0.0, 1.0), vec![], "c").is_err());
    assert!(HeatMap::new(
        "m",
        ("x", "y"),
        (1, 1),
        (0.0, f64::NAN, 0.0, 1.0),
        vec![1.0],
        "c"
    )
    .is_err());
}

#[test]
fn contour_lines_are_drawn_deterministically_with_their_legend() {
    let plain = map("Activation time", true);
    let m = plain
        .clone()
        .with_contours_every(5.0, "5 ms isochrones")
        .unwrap();
    assert_eq!(m.contours, vec![5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
    let png = m.render(Format::Png).unwrap();
    assert_eq!(png, m.render(Format::Png).unwrap());
    let black = |bytes: &[u8]| {
        let (_, _, px) = decode(bytes);
        px.chunks(3).filter(|p| *p == [0, 0, 0]).count()
    };
    // Six lines across a 720-pixel map: thousands of black pixels more than
    // the map without them.
    let (with, without) = (black(&png), black(&plain.render(Format::Png).unwrap()));
    assert!(with > without + 2000, "{with} vs {without}");
    let svg = m.render(Format::Svg).unwrap();
    assert!(svg_texts(&svg).iter().any(|t| t == "5 ms isochrones"));
    assert!(!svg_texts(&plain.render(Format::Svg).unwrap())
        .iter()
        .any(|t| t.contains("isochrones")));
    assert!(plain.clone().with_contours_every(0.0, "x").is_err());
    assert!(plain.clone().with_contours_every(f64::NAN, "x").is_err());
    assert!(plain.with_contours_every(1e-6, "x").is_err());
}
