//! The translator: every fop is generated from the fop table and logged around the call to
//! the child.

use xlator_api::{Ctx, Errno, Fop, Init, Subvol, Translator};

use crate::options::TraceOptions;
use crate::show::{push_arg, show_reply};
use crate::tracer::Tracer;

/// Translator type name.
const TYPE: &str = "debug/trace";

/// debug/trace.
pub struct Trace {
    children: [Subvol; 1],
    tracer: Tracer,
}

/// One traced override per fop in the table. Arguments are rendered before the call, since
/// it consumes them.
macro_rules! traced_fops {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                let Some(mut call) = self.tracer.begin(Fop::$Variant) else {
                    return self.children[0].$name(cx $(, $arg)*).await;
                };
                #[allow(unused_mut)]
                let mut args = String::new();
                $( push_arg!(args, $arg); )*
                self.tracer.down(&mut call, cx, &args);
                let r = self.children[0].$name(cx $(, $arg)*).await;
                self.tracer.up(&call, &show_reply!(&r));
                r
            }
        )*
    };
}

impl Translator for Trace {
    const TYPE: &'static str = TYPE;
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Logs every fop passing through with its arguments on the way \
        down and its reply or errno and latency on the way up, through `tracing`.";

    type Options = TraceOptions;

    fn init(init: Init<TraceOptions>) -> Result<Self, String> {
        let Init {
            name,
            options: o,
            children,
            ..
        } = init;
        let children = xlator_api::one_child(TYPE, &name, children)?;
        let tracer = Tracer::new(name, o.log_level, &o.include, &o.exclude);
        Ok(Trace { children, tracer })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, o: TraceOptions) -> Result<(), String> {
        self.tracer.set(o.log_level, &o.include, &o.exclude);
        Ok(())
    }

    xlator_api::for_each_fop!(traced_fops);
}
